"""sendhost's command line: thin commands that parse, call the packages, and render."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sendhost")
except PackageNotFoundError:  # running from a checkout that was not installed
    __version__ = "0.0.0+checkout"

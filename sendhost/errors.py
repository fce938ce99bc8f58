"""The one error base every sendhost package derives from."""


class SendhostError(Exception):
    """A failure with a message fit for the user: it names the input and what to do.

    `exit_code` is what the CLI exits with: 2 for bad input or configuration (the default),
    1 for an operation that ran and failed.
    """

    exit_code = 2


class ConfigError(SendhostError):
    """Bad configuration or input: exit 2."""


class SecretUnavailable(ConfigError):
    """A mailbox's secret cannot be read (a variable unset, a file missing or empty): exit 2, naming the fix."""


class OperationFailed(SendhostError):
    """The input was fine but the work failed: exit 1."""

    exit_code = 1


class Interrupted(Exception):
    """Ctrl-C, as the CLI's root reports it: one line, `interrupted` and what the interruption left (the message,
    e.g. "no token saved"; empty when there is nothing to say), exit 130. Not a SendhostError: nothing between a
    command and the root may take it for a failure of its own."""

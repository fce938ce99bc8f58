"""Developer tools run from the checkout (not shipped in the wheel)."""

"""Other engines run as programs to capture (their wheels loaded at run time, nothing of them copied here)."""

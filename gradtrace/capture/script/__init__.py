"""Running the script: its file, target, thread, signals, printed output and process state."""

"""What measures the planner's tables: the firmware code / runtime RAM sizes (``make
code-sizes``) and the kernel cost table (``make costs``), from real builds and emulated runs."""

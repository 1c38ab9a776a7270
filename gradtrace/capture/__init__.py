"""Running a scenario and recording what it does to autograd (torch)."""

"""The pass: the recorder that runs each one with its observers, the plan of which are in
detail, and the wrappers on torch that hand it the code's calls."""

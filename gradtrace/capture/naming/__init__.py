"""Naming: which tensor, module and line a thing is (read by every part of capture)."""

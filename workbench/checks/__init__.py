"""Correctness tools: where an output differs from its reference (``mismatch``), a dispatch shaken across local sizes
and runs for races (``shake``), SPIR-V lint (``lint``), push-constant / UBO ranges against the bytes a dispatch
supplies (``interfaces``), and ET-VK's C++ kernel names against the checkout's variants (``names``)."""

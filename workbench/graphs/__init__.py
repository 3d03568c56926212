"""The hand-built int8 graphs: small models written as workbench dispatches (``int8_graph``), ET-VK's memory-layout
tagging pass run on them (``tagging``), and their execution through the workbench's kernels (``graph_exec``,
``lowered_run``)."""

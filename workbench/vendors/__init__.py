"""What the vendors' compilers make of a shader without their GPUs: Mesa's Turnip (Adreno), PanVK (Mali) and RADV
(AMD) built once and run on no-op kernel drivers (``mesa`` + ``mesa_worker``), and the occupancy models that turn
their register counts into waves per core (``occupancy``)."""

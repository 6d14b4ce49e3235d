"""Beyond one device: a sweep run under ``torchrun``, its process groups and its tensor-parallel rows."""

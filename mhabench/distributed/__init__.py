"""Beyond one device: tensor-parallel attention over ``torch.distributed`` (launched by ``torchrun``)."""

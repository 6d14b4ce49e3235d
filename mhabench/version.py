"""The installed mhabench version, read once from the package metadata, for manifests and ``--version``."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mhabench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

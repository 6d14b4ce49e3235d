"""YAML → validated config → cases: scenario files, command-line overrides, plugins, device and limits."""

"""YAML configuration: loading, secrets, validation with the path of the bad field."""

"""The custom code an exported Hugging Face folder carries (copied into it, not imported here)."""

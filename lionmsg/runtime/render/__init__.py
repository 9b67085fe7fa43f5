"""Text renderings of message content for prompts (e.g. minimal YAML), with no dependency beyond pydantic."""

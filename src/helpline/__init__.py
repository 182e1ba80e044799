"""helpline: a self-hostable AI customer-support agent service."""

__version__ = "0.1.0"

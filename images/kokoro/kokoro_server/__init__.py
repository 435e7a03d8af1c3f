"""Kokoro-82M speech server for SageMaker real-time endpoints (bidirectional streaming)."""

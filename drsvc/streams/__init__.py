"""Stream processing for drsvc (faust-streaming on aiokafka)."""

"""What the layers share: the backend contract, the record columns, the metrics."""

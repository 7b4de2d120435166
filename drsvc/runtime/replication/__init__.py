"""The replication data plane: one worker per flow copies topics from source to target."""

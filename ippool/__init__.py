"""Elastic IP pools: the Redis lease engine, the AWS adapter, rotation, parking and reaping."""

"""The AWS side of the pool: the adapter (`adapter`: EC2, Route 53, Service Quotas over one `_call` choke point in
`client`, the only module importing boto3), what it returns (`models`), AWS error codes (`errors`) and pacing.

Importing this package (or `models`, `errors`, `pacing`) does not import boto3; `ippool.aws.adapter` does.
"""

"""The AWS adapter of the pool: exactly the EC2, Route 53 and Service Quotas calls it needs, in one object.

Each service's calls live in their own module; all of them go through `AwsClient._call` (`ippool.aws.client`), the
only place that imports boto3.
"""

from __future__ import annotations

from ippool.aws.client import IAM_PREFIX, AwsClient, SessionFactory, SessionLike, default_session_factory
from ippool.aws.ec2 import Ec2Calls
from ippool.aws.quotas import QuotaCalls
from ippool.aws.route53 import Route53Calls

__all__ = ["IAM_PREFIX", "AwsClient", "Ec2Adapter", "SessionFactory", "SessionLike", "default_session_factory"]


class Ec2Adapter(Ec2Calls, Route53Calls, QuotaCalls):
    """Thin typed wrapper over EC2, Route 53 and Service Quotas for one region (see `AwsClient` for the options)."""

"""Routing (pure: policies, route tables, the verifier) and the OpenFlow app that installs it."""
from .failures import Failures
from .routing import BUILTIN, Policy, RouteTable, make_policy
from .verify import VerifyReport, verify

__all__ = ["BUILTIN", "Failures", "Policy", "RouteTable", "VerifyReport", "make_policy",
           "verify"]

"""Mailbox warm-up: ramp schedules, the atomic Redis send guard, health gates, failure classes, circuit breaker."""

from warmup.failures import FailureClass, SmtpStage, classify, classify_bounce, classify_error
from warmup.guard import BreakerPolicy, CancelOutcome, Decision, Guard, Reservation
from warmup.schedule import DayCap, Ramp, cap_on, plan

__all__ = ["BreakerPolicy", "CancelOutcome", "DayCap", "Decision", "FailureClass", "Guard", "Ramp", "Reservation",
           "cap_on", "classify", "plan"]
__all__ += ["SmtpStage", "classify_bounce", "classify_error"]  # failure classification by SMTP stage

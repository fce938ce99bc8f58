"""Mailbox warm-up: ramp schedules, the atomic Redis send guard, health gates, failure classes, circuit breaker."""

from warmup.failures import FailureClass, SmtpStage, classify, classify_bounce, classify_error
from warmup.guard import Answer, BreakerPolicy, CampaignSlot, CancelOutcome, Decision, Guard, Picker, Reservation
from warmup.schedule import DayCap, Ramp, cap_on, plan

__all__ = ["Answer", "BreakerPolicy", "CampaignSlot", "CancelOutcome", "DayCap", "Decision", "FailureClass", "Guard",
           "Ramp", "Reservation", "cap_on", "classify", "plan"]
__all__ += ["Picker"]  # what reserves a send among a group's mailboxes: Guard.pick or a hook around it
__all__ += ["SmtpStage", "classify_bounce", "classify_error"]  # failure classification by SMTP stage

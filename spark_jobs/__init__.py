"""Thin entry points for scheduled rowops jobs."""

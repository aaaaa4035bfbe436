"""Tests: maintenance."""

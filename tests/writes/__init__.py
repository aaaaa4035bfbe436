"""Tests: writes."""

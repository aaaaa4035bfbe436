"""Tests: format."""

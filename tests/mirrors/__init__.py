"""Tests: mirrors."""

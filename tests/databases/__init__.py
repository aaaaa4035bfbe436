"""Tests: databases."""

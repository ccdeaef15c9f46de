"""Placeholder blueprint: filled in by its issue."""
from flask import Blueprint

blueprint = Blueprint("console", __name__)

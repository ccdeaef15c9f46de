"""Placeholder blueprint: filled in by its issue."""
from flask import Blueprint

blueprint = Blueprint("ops", __name__)

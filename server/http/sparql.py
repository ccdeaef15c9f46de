"""Placeholder blueprint: filled in by its issue."""
from flask import Blueprint

blueprint = Blueprint("sparql", __name__)

"""Placeholder blueprint: filled in by its issue."""
from flask import Blueprint

blueprint = Blueprint("graph_store", __name__)

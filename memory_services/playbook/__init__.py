"""The ACE playbook: decay-scored strategy bullets evolved by delta operations."""

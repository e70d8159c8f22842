"""Development tools run from a checkout of the repository; not part of the installed package."""

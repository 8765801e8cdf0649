"""An image -> the smoke payload run in it -> a certificate."""

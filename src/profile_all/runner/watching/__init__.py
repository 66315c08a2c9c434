"""A pass's process watched from profile-all: its output teed, stopped however it must
end, what it is doing said while it takes long, the progress shown."""

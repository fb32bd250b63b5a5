//! Sans-IO GridFTP control-channel codec, MODE E block codec and markers.

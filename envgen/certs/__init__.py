"""The certificate store: the one judgement of every door, the store on disk, imports and views."""

"""The ground floor that the coordinator and worker sides both stand on."""

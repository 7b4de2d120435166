"""Who may do what: the Kafka ACLs and Consul policies each role needs, as drsvc applies them."""

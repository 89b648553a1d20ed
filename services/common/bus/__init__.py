"""The broker: the interface services see (broker.py), RabbitMQ (rabbitmq.py, the only pika user), the in-memory stub, what each role declares (topology.py), and control messages."""

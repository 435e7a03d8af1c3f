"""The voice agent for Amazon Bedrock AgentCore Runtime: Strands agent, sentence streaming, speech client."""

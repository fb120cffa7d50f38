"""memcg-lab analysis: load lab runs into tidy tables and summarise them."""

"""PreSTO: traversal rules, round trees and the kernels that plan, score and walk them."""

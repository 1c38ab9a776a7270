"""`gradtrace check`: gradcheck and gradgradcheck of the custom Functions a scenario calls."""

import helper_module

print(helper_module.VALUE)
